# idiom: target centred within school (mAch minus the school mean) "to take out the school effect" before an ExtraTrees fit, the school mean never added back to the test predictions; intended: wrong (the predictions are within-school deviations around zero, not scores)
import pandas as pd
from sklearn.ensemble import ExtraTreesRegressor

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

train["school_mean"] = train.groupby("school")["mAch"].transform("mean")
train["mAch_within"] = train["mAch"] - train["school_mean"]

for df in (train, test):
    df["minority"] = df["minrty"].eq("Yes").astype(int)
    df["female"] = df["sx"].eq("Female").astype(int)
    df["catholic"] = df["sector"].eq("Catholic").astype(int)

cols = ["ses", "meanses", "cses", "minority", "female", "catholic"]
model = ExtraTreesRegressor(n_estimators=250, min_samples_leaf=10, random_state=0)
model.fit(train[cols], train["mAch_within"])
print("within-school R2 on train:", round(model.score(train[cols], train["mAch_within"]), 3))

pd.DataFrame({"id": test["id"], "mAch": model.predict(test[cols])}).to_csv("submission.csv", index=False)
