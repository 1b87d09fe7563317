# idiom: GradientBoostingClassifier wrapped in CalibratedClassifierCV (isotonic), probabilities for log loss; intended: valid
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# in.subcohort is read back as bool
train["in.subcohort"] = train["in.subcohort"].astype(int)
test["in.subcohort"] = test["in.subcohort"].astype(int)

features = ["instit", "histol", "stage", "study", "age", "in.subcohort"]
X, y = train[features], train["rel"]

X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.2, stratify=y, random_state=7)
gbm = GradientBoostingClassifier(n_estimators=150, max_depth=2, learning_rate=0.05, subsample=0.8, random_state=7)
model = CalibratedClassifierCV(gbm, method="isotonic", cv=3)
model.fit(X_tr, y_tr)
print("holdout log loss:", log_loss(y_val, model.predict_proba(X_val)[:, 1]))

model.fit(X, y)
proba = model.predict_proba(test[features])[:, 1]
pd.DataFrame({"id": test["id"], "rel": proba.clip(0.001, 0.999)}).to_csv("submission.csv", index=False)
