# idiom: StandardScaler fitted and applied to the training matrix outside a Pipeline, coefficients printed by name, the test matrix passed to the model unscaled; intended: wrong (raw ages meet weights fitted on standardised columns, so the probabilities saturate)
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

cols = ["age", "kappa", "lambda", "creatinine", "mgus", "flc.grp"]
medians = train[cols].median()
X = train[cols].fillna(medians)
X_test = test[cols].fillna(medians)
X["male"] = (train["sex"] == "M").astype(int)
X_test["male"] = (test["sex"] == "M").astype(int)

scaler = StandardScaler()
X_scaled = scaler.fit_transform(X)

clf = LogisticRegression(max_iter=1000)
clf.fit(X_scaled, train["death"])
print(dict(zip(X.columns, np.round(clf.coef_[0], 3))))

proba = clf.predict_proba(X_test.values)[:, 1]
pd.DataFrame({"id": test["id"], "death": proba}).to_csv("submission.csv", index=False)
