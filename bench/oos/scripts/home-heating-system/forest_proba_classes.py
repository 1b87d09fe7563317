# idiom: RandomForest predict_proba framed with clf.classes_ as columns, probabilities clipped and renormalised; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import cross_val_predict

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

region_map = {r: i for i, r in enumerate(sorted(train["region"].unique()))}
for df in (train, test):
    df["region"] = df["region"].map(region_map).fillna(-1)
    # relative costs: what the system costs compared with the cheapest option
    ic = df[[c for c in df.columns if c.startswith("ic.")]]
    oc = df[[c for c in df.columns if c.startswith("oc.")]]
    for c in ic.columns:
        df[c + "_rel"] = df[c] / ic.min(axis=1)
    for c in oc.columns:
        df[c + "_rel"] = df[c] / oc.min(axis=1)

features = [c for c in train.columns if c not in ("id", "depvar")]
rf = RandomForestClassifier(n_estimators=500, min_samples_leaf=10, max_features=0.3, random_state=11)

oof = cross_val_predict(rf, train[features], train["depvar"], cv=5, method="predict_proba")
print("CV multiclass log loss:", log_loss(train["depvar"], oof, labels=sorted(train["depvar"].unique())))

rf.fit(train[features], train["depvar"])
proba = np.clip(rf.predict_proba(test[features]), 0.01, 0.99)
proba = proba / proba.sum(axis=1, keepdims=True)
submission = pd.DataFrame(proba, columns=rf.classes_)
submission.insert(0, "id", test["id"])
submission.to_csv("submission.csv", index=False)
print(submission.describe())
