# idiom: yes/no columns mapped to 1/0 with Series.map in a loop, get_dummies of joblost reindexed to the train columns, LogisticRegression on unscaled columns with the default 0.5 threshold; intended: valid
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

yes_no = ["nwhite", "school12", "bluecol", "smsa", "married", "dkids", "dykids", "head"]
for df in (train, test):
    for col in yes_no:
        df[col] = df[col].map({"yes": 1, "no": 0})
    df["sex"] = df["sex"].map({"male": 1, "female": 0})

train = pd.get_dummies(train, columns=["joblost"], dtype=int)
test = pd.get_dummies(test, columns=["joblost"], dtype=int)
features = [c for c in train.columns if c not in ("id", "ui")]
test = test.reindex(columns=["id"] + features, fill_value=0)

clf = LogisticRegression(max_iter=500)
clf.fit(train[features], train["ui"])
pred = clf.predict(test[features])
print(pd.Series(pred).value_counts())
pd.DataFrame({"id": test["id"], "ui": pred}).to_csv("submission.csv", index=False)
