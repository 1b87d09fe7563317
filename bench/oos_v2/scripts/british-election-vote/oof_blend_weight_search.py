# idiom: out-of-fold probabilities of a LogisticRegression and a RandomForest from cross_val_predict, the blend weight chosen on the out-of-fold log loss over np.linspace, applied to the test probabilities; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
train["female"] = (train["gender"] == "female").astype(int)
test["female"] = (test["gender"] == "female").astype(int)
cols = [c for c in train.columns if c not in ("id", "vote", "gender")]
X, y, X_test = train[cols], train["vote"], test[cols]

linear = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=2000))
forest = RandomForestClassifier(n_estimators=200, min_samples_leaf=8, max_features=0.5, random_state=1)
folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
oof_linear = cross_val_predict(linear, X, y, cv=folds, method="predict_proba")
oof_forest = cross_val_predict(forest, X, y, cv=folds, method="predict_proba")

classes = np.sort(y.unique())
losses = {}
for w in np.linspace(0, 1, 11):
    losses[round(w, 1)] = log_loss(y, w * oof_linear + (1 - w) * oof_forest, labels=classes)
best_w = min(losses, key=losses.get)
print("OOF log loss by linear weight:", losses, "-> best", best_w)

linear.fit(X, y)
forest.fit(X, y)
blend = best_w * linear.predict_proba(X_test) + (1 - best_w) * forest.predict_proba(X_test)
out = pd.DataFrame(blend, columns=linear.classes_)
out.insert(0, "id", test["id"])
out.to_csv("submission.csv", index=False)
