# idiom: ColumnTransformer + RidgeCV inside TransformedTargetRegressor(func=np.log, inverse_func=np.exp), MAPE by cross-validation; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, PowerTransformer

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

categorical = ["heating", "fuel", "sewer", "waterfront", "newConstruction", "centralAir"]
numeric = ["lotSize", "age", "landValue", "livingArea", "pctCollege", "bedrooms", "fireplaces", "bathrooms", "rooms"]

pre = ColumnTransformer([
    ("num", PowerTransformer(method="yeo-johnson"), numeric),
    ("cat", OneHotEncoder(handle_unknown="ignore", drop="if_binary"), categorical),
])
model = TransformedTargetRegressor(
    regressor=Pipeline([("pre", pre), ("ridge", RidgeCV(alphas=np.logspace(-3, 3, 25)))]),
    func=np.log, inverse_func=np.exp,
)

X = train[numeric + categorical]
y = train["price"]
mape = -cross_val_score(model, X, y, cv=5, scoring="neg_mean_absolute_percentage_error")
print(f"CV MAPE: {mape.mean():.4f}")

model.fit(X, y)
pd.DataFrame({"id": test["id"], "price": model.predict(test[numeric + categorical])}).to_csv("submission.csv", index=False)
