# idiom: KNeighborsClassifier(n_neighbors=40) on standardised columns, probabilities clipped away from 0 with np.clip and renormalised row-wise before writing; intended: valid
import numpy as np
import pandas as pd
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
train["gender"] = train["gender"].map({"female": 1, "male": 0})
test["gender"] = test["gender"].map({"female": 1, "male": 0})

feature_cols = train.columns.difference(["id", "vote"])
knn = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=40))
knn.fit(train[feature_cols], train["vote"])

proba = np.clip(knn.predict_proba(test[feature_cols]), 0.02, 1.0)
proba = proba / proba.sum(axis=1, keepdims=True)
submission = pd.DataFrame(proba, columns=knn.classes_)
submission.insert(0, "id", test["id"])
submission.to_csv("submission.csv", index=False)
