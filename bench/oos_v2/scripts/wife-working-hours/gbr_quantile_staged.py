# idiom: GradientBoostingRegressor(loss='quantile', alpha=0.5), the number of trees read off staged_predict on a holdout split, then refit on all rows with that count; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

occupations = sorted(train["occupation"].unique())
for df in (train, test):
    for occ in occupations:
        df[f"occ_{occ}"] = (df["occupation"] == occ).astype(int)
    df["kids_total"] = df["child5"] + df["child13"] + df["child17"]

features = [c for c in train.columns if c not in ("id", "hours", "occupation")]
X, y = train[features], train["hours"]
X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0)

params = dict(loss="quantile", alpha=0.5, learning_rate=0.05, max_depth=3, subsample=0.8, min_samples_leaf=20,
              random_state=0)
probe = GradientBoostingRegressor(n_estimators=300, **params).fit(X_tr, y_tr)
val_mae = [np.mean(np.abs(y_va - p)) for p in probe.staged_predict(X_va)]
best_n = int(np.argmin(val_mae)) + 1
print(f"best number of trees {best_n}, holdout MAE {min(val_mae):.1f}")

final = GradientBoostingRegressor(n_estimators=best_n, **params).fit(X, y)
pd.DataFrame({"id": test["id"], "hours": final.predict(test[features])}).to_csv("submission.csv", index=False)
