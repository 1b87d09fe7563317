# idiom: holdout check roc_auc_score(y_val, model.predict_proba(X_val)) on the whole two-column probability matrix, before the final fit; intended: crash (ValueError: y should be a 1d array, got an array of shape (n, 2))
import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

fill = train["creatinine"].median()
for df in (train, test):
    df["sex"] = df["sex"].eq("M").astype(int)
    df["creatinine"] = df["creatinine"].fillna(fill)

X = train.drop(columns=["id", "death"])
y = train["death"]
X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)

model = ExtraTreesClassifier(n_estimators=300, min_samples_leaf=5, random_state=0)
model.fit(X_tr, y_tr)
print("validation AUC:", roc_auc_score(y_val, model.predict_proba(X_val)))

model.fit(X, y)
pred = model.predict_proba(test.drop(columns=["id"]))[:, 1]
pd.DataFrame({"id": test["id"], "death": pred}).to_csv("submission.csv", index=False)
