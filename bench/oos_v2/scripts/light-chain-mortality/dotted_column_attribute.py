# idiom: columns read by attribute access (df.sex, df.kappa, df.creatinine) carried over to the dotted name df.sample.yr, which is the DataFrame.sample method; intended: crash (AttributeError: the bound method has no attribute 'yr')
import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
print(train.describe().T)

creatinine_fill = train.creatinine.median()
for df in (train, test):
    df["male"] = (df.sex == "M").astype(int)
    df["flc_sum"] = df.kappa + df["lambda"]
    df["years_since_sample"] = 2003 - df.sample.yr
    df["creatinine"] = df.creatinine.fillna(creatinine_fill)

features = ["age", "male", "flc_sum", "years_since_sample", "creatinine", "mgus", "flc.grp"]
gb = GradientBoostingClassifier(n_estimators=200, max_depth=3, learning_rate=0.05, random_state=0)
gb.fit(train[features], train.death)
pd.DataFrame({"id": test.id, "death": gb.predict_proba(test[features])[:, 1]}).to_csv("submission.csv", index=False)
