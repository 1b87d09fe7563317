# idiom: pd.get_dummies called on train and test separately, GradientBoosting on log1p(target); intended: crash (ValueError: the one-hot columns of train and test do not line up)
import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# company names are unique, not useful as a feature
train = train.drop(columns=["name"])
test = test.drop(columns=["name"])

train["profits"] = train["profits"].fillna(0)
test["profits"] = test["profits"].fillna(0)

X = pd.get_dummies(train.drop(columns=["id", "marketvalue"]), columns=["country", "category"])
X_test = pd.get_dummies(test.drop(columns=["id"]), columns=["country", "category"])
y = np.log1p(train["marketvalue"])
print(X.shape, X_test.shape)

model = GradientBoostingRegressor(n_estimators=300, max_depth=3, learning_rate=0.05, random_state=0)
model.fit(X, y)
pred = np.expm1(model.predict(X_test))

pd.DataFrame({"id": test["id"], "marketvalue": pred}).to_csv("submission.csv", index=False)
