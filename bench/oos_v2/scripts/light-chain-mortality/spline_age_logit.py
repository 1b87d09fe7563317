# idiom: SplineTransformer on age and a one-hot of the FLC decile group inside make_column_transformer, LogisticRegression, a StratifiedKFold loop printing per-fold AUC with f-strings; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, SplineTransformer, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
target = "death"

columns = make_column_transformer(
    (SplineTransformer(n_knots=6, degree=3), ["age"]),
    (OneHotEncoder(handle_unknown="ignore"), ["flc.grp", "sex"]),
    (make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), ["creatinine", "kappa", "lambda"]),
    ("passthrough", ["mgus"]),
)
clf = make_pipeline(columns, LogisticRegression(C=1.0, max_iter=3000))

X = train.drop(columns=["id", target])
y = train[target]
skf = StratifiedKFold(n_splits=5, shuffle=True, random_state=2024)
aucs = []
for fold, (tr, va) in enumerate(skf.split(X, y)):
    clf.fit(X.iloc[tr], y.iloc[tr])
    auc = roc_auc_score(y.iloc[va], clf.predict_proba(X.iloc[va])[:, 1])
    aucs.append(auc)
    print(f"fold {fold}: AUC {auc:.4f}")
print(f"mean AUC {np.mean(aucs):.4f}")

clf.fit(X, y)
pred = clf.predict_proba(test.drop(columns=["id"]))[:, 1]
pd.DataFrame({"id": test["id"], "death": pred}).to_csv("submission.csv", index=False)
