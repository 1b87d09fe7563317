# idiom: KFold(n_splits=5, random_state=42) without shuffle=True in a fold-averaging loop of HistGradientBoostingRegressor(loss='absolute_error'); intended: crash (ValueError: setting random_state has no effect since shuffle is False)
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import KFold

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
train["occupation"] = train["occupation"].astype("category")
test["occupation"] = pd.Categorical(test["occupation"], categories=train["occupation"].cat.categories)

features = [c for c in train.columns if c not in ("id", "hours")]
X, y = train[features], train["hours"]

kf = KFold(n_splits=5, random_state=42)
preds = np.zeros(len(test))
scores = []
for tr_idx, va_idx in kf.split(X):
    model = HistGradientBoostingRegressor(loss="absolute_error", learning_rate=0.05, max_iter=200, random_state=42)
    model.fit(X.iloc[tr_idx], y.iloc[tr_idx])
    scores.append(mean_absolute_error(y.iloc[va_idx], model.predict(X.iloc[va_idx])))
    preds += model.predict(test[features]) / kf.get_n_splits()
print("fold MAE:", np.round(scores, 1), "mean", np.mean(scores).round(1))
pd.DataFrame({"id": test["id"], "hours": preds}).to_csv("submission.csv", index=False)
