# idiom: evaluation helper printing RMSE with mean_squared_error(..., squared=False) (removed in scikit-learn 1.6) before the submission is written; intended: crash (TypeError)
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.metrics import mean_absolute_error, mean_squared_error
from sklearn.model_selection import KFold

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
features = [c for c in train.columns if c not in ("id", "re78")]


def evaluate(y_true, y_pred):
    return {
        "mae": mean_absolute_error(y_true, y_pred),
        "rmse": mean_squared_error(y_true, y_pred, squared=False),
    }


scores = []
for tr, va in KFold(n_splits=5, shuffle=True, random_state=0).split(train):
    rf = RandomForestRegressor(n_estimators=200, min_samples_leaf=10, random_state=0)
    rf.fit(train.iloc[tr][features], train.iloc[tr]["re78"])
    scores.append(evaluate(train.iloc[va]["re78"], rf.predict(train.iloc[va][features])))
print(pd.DataFrame(scores).mean())

rf = RandomForestRegressor(n_estimators=200, min_samples_leaf=10, random_state=0)
rf.fit(train[features], train["re78"])
pd.DataFrame({"id": test["id"], "re78": np.maximum(rf.predict(test[features]), 0)}).to_csv("submission.csv", index=False)
