# idiom: feature matrix assembled with np.column_stack and np.where on the yes/no strings, SGDClassifier(loss='hinge') with class_weight='balanced' on standardised columns; intended: valid
import numpy as np
import pandas as pd
from sklearn.linear_model import SGDClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
flags = ["nwhite", "school12", "bluecol", "smsa", "married", "dkids", "dykids", "head"]
nums = ["stateur", "statemb", "age", "tenure", "yrdispl", "rr"]


def matrix(df):
    parts = [df[nums].to_numpy(dtype=float)]
    parts += [np.where(df[c].to_numpy() == "yes", 1.0, 0.0) for c in flags]
    parts.append(np.where(df["sex"].to_numpy() == "male", 1.0, 0.0))
    parts.append(np.where(df["joblost"].to_numpy() == "slack_work", 1.0, 0.0))
    return np.column_stack(parts)


X, X_test = matrix(train), matrix(test)
mean, std = X.mean(axis=0), X.std(axis=0)
X = (X - mean) / std
X_test = (X_test - mean) / std
y = np.where(train["ui"].to_numpy() == "yes", 1, 0)

clf = SGDClassifier(loss="hinge", alpha=1e-3, class_weight="balanced", max_iter=2000, tol=1e-4, random_state=0)
clf.fit(X, y)
print("training accuracy:", round(clf.score(X, y), 3))
pred = np.where(clf.predict(X_test) == 1, "yes", "no")
pd.DataFrame({"id": test["id"], "ui": pred}).to_csv("submission.csv", index=False)
