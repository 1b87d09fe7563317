# idiom: features cast with .astype(np.float) (the alias was removed in NumPy 1.24), hand-rolled one-hot of yes/no columns; intended: crash (AttributeError)
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def preprocess(df):
    df = df.copy()
    for col in df.columns:
        if set(df[col].dropna().unique()) <= {"yes", "no"}:
            df[col] = (df[col] == "yes").astype(int)
    return df


train_p = preprocess(train.drop(columns=["deny"]))
test_p = preprocess(test)
features = [c for c in train_p.columns if c != "id"]

X = train_p[features].values.astype(np.float)
X_test = test_p[features].values.astype(np.float)
y = (train["deny"] == "yes").astype(int).values

clf = LogisticRegression(C=1.0, max_iter=1000)
clf.fit(X, y)
pd.DataFrame({"id": test["id"], "deny": clf.predict_proba(X_test)[:, 1]}).to_csv("submission.csv", index=False)
