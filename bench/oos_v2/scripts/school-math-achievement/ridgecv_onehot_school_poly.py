# idiom: ColumnTransformer with a one-hot school id (handle_unknown='ignore'), one-hot flags and PolynomialFeatures(2) on the scaled SES columns, RidgeCV over np.logspace alphas; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

ses_cols = ["ses", "meanses", "cses"]
flag_cols = ["minrty", "sx", "sector"]
pre = ColumnTransformer([
    ("school", OneHotEncoder(handle_unknown="ignore"), ["school"]),
    ("flags", OneHotEncoder(drop="first"), flag_cols),
    ("ses", Pipeline([("scale", StandardScaler()), ("poly", PolynomialFeatures(degree=2, include_bias=False))]),
     ses_cols),
], sparse_threshold=0.0)
model = Pipeline([("pre", pre), ("ridge", RidgeCV(alphas=np.logspace(-2, 3, 21)))])
model.fit(train[["school"] + flag_cols + ses_cols], train["mAch"])
print("chosen alpha:", model.named_steps["ridge"].alpha_)

pred = model.predict(test[["school"] + flag_cols + ses_cols])
pd.DataFrame({"id": test["id"], "mAch": pred}).to_csv("submission.csv", index=False)
