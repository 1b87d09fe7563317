# idiom: school statistics from groupby(['school', 'sx']).agg with named aggregations merged onto train and test on 'school' alone, so a row is repeated once per sex of its school; intended: invalid submission (the merge duplicates test ids)
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

stats = (train.groupby(["school", "sx"])["mAch"]
         .agg(school_sx_mean="mean", school_sx_n="size")
         .reset_index())
train = train.merge(stats.drop(columns="sx"), on="school", how="left")
test = test.merge(stats.drop(columns="sx"), on="school", how="left")
test = test.fillna({"school_sx_mean": train["mAch"].mean(), "school_sx_n": 0})
print("shapes after the merge:", train.shape, test.shape)

for df in (train, test):
    df["minority"] = (df["minrty"] == "Yes").astype(int)
    df["female"] = (df["sx"] == "Female").astype(int)
    df["catholic"] = (df["sector"] == "Catholic").astype(int)

features = ["ses", "meanses", "cses", "minority", "female", "catholic", "school_sx_mean", "school_sx_n"]
gbr = GradientBoostingRegressor(n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8, random_state=0)
gbr.fit(train[features], train["mAch"])
pd.DataFrame({"id": test["id"], "mAch": gbr.predict(test[features])}).to_csv("submission.csv", index=False)
