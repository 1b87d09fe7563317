# idiom: yes/no feature columns mapped to 1/0 in a loop that leaves the target as text, balanced RandomForest, predictions turned back into labels with np.where(pred == 1, 'yes', 'no'); intended: wrong (predict already returns 'no'/'yes', so pred == 1 never holds and every row is written as 'no')
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

binary_cols = ["nwhite", "school12", "bluecol", "smsa", "married", "dkids", "dykids", "head"]
for df in (train, test):
    for col in binary_cols:
        df[col] = np.where(df[col] == "yes", 1, 0)
    df["sex"] = np.where(df["sex"] == "male", 1, 0)
    df["joblost"] = df["joblost"].astype("category").cat.codes

features = [c for c in train.columns if c not in ("id", "ui")]
rf = RandomForestClassifier(n_estimators=300, min_samples_leaf=10, class_weight="balanced", random_state=7)
rf.fit(train[features], train["ui"])

pred = rf.predict(test[features])
labels = np.where(pred == 1, "yes", "no")
print(pd.Series(labels).value_counts())
pd.DataFrame({"id": test["id"], "ui": labels}).to_csv("submission.csv", index=False)
