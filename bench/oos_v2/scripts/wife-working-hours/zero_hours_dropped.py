# idiom: rows with hours == 0 dropped as "missing or bad records" before fitting a GradientBoostingRegressor on one-hot occupation; intended: wrong (a quarter of the wives do not work, so every prediction is pulled far above zero)
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

print("rows with zero hours:", (train["hours"] == 0).sum())
train = train[train["hours"] > 0].copy()

X = pd.get_dummies(train.drop(columns=["id", "hours"]), columns=["occupation"], dtype=int)
X_test = pd.get_dummies(test.drop(columns=["id"]), columns=["occupation"], dtype=int).reindex(columns=X.columns,
                                                                                              fill_value=0)
gbr = GradientBoostingRegressor(loss="absolute_error", n_estimators=250, max_depth=3, learning_rate=0.05,
                                random_state=0)
gbr.fit(X, train["hours"])
pred = gbr.predict(X_test)
print("predicted hours:", pd.Series(pred).describe().round(0).to_dict())
pd.DataFrame({"id": test["id"], "hours": pred}).to_csv("submission.csv", index=False)
