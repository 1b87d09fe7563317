# idiom: KFold loop training two models per fold (Ridge on scaled features, RandomForest), out-of-fold R2 of each and of the 50/50 blend; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
cols = [c for c in train.columns if c not in ("id", "colgpa")]
X, y, X_test = train[cols].to_numpy(), train["colgpa"].to_numpy(), test[cols].to_numpy()

oof = {"ridge": np.zeros(len(y)), "rf": np.zeros(len(y))}
test_preds = {"ridge": np.zeros(len(X_test)), "rf": np.zeros(len(X_test))}
folds = KFold(n_splits=5, shuffle=True, random_state=123)
for train_idx, valid_idx in folds.split(X):
    models = {
        "ridge": make_pipeline(StandardScaler(), Ridge(alpha=3.0)),
        "rf": RandomForestRegressor(n_estimators=200, min_samples_leaf=15, max_features=0.5, random_state=123),
    }
    for name, model in models.items():
        model.fit(X[train_idx], y[train_idx])
        oof[name][valid_idx] = model.predict(X[valid_idx])
        test_preds[name] += model.predict(X_test) / folds.n_splits

for name in oof:
    print(name, "OOF R2:", round(r2_score(y, oof[name]), 4))
blend_oof = 0.5 * oof["ridge"] + 0.5 * oof["rf"]
print("blend OOF R2:", round(r2_score(y, blend_oof), 4))

final = 0.5 * test_preds["ridge"] + 0.5 * test_preds["rf"]
pd.DataFrame({"id": test["id"], "colgpa": np.clip(final, 0, 4)}).to_csv("submission.csv", index=False)
