# idiom: PolynomialFeatures(degree=2) + StandardScaler + LassoCV pipeline, coefficients that survived printed by name; intended: valid
import numpy as np
import pandas as pd
from sklearn.linear_model import LassoCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
base = ["sat", "tothrs", "athlete", "verbmath", "hsize", "hsperc", "female", "white", "black"]

model = Pipeline([
    ("poly", PolynomialFeatures(degree=2, include_bias=False)),
    ("scale", StandardScaler()),
    ("lasso", LassoCV(alphas=np.logspace(-4, -1, 20), cv=5, max_iter=20000)),
])
model.fit(train[base], train["colgpa"])
print("chosen alpha:", model.named_steps["lasso"].alpha_)
names = model.named_steps["poly"].get_feature_names_out(base)
coefs = pd.Series(model.named_steps["lasso"].coef_, index=names)
print(coefs[coefs.abs() > 1e-6].sort_values(key=abs, ascending=False).head(12))

pred = model.predict(test[base])
pd.DataFrame({"id": test["id"], "colgpa": pred}).to_csv("submission.csv", index=False)
