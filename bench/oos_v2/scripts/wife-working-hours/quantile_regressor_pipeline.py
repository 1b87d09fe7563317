# idiom: QuantileRegressor(quantile=0.5, solver='highs') because the metric is MAE, in a Pipeline with StandardScaler and one-hot occupation, holdout MAE compared with the median; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import QuantileRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

numeric = ["income", "age", "education", "child5", "child13", "child17", "nonwhite", "owned", "mortgage", "unemp"]
model = Pipeline([
    ("prep", ColumnTransformer([
        ("num", StandardScaler(), numeric),
        ("occ", OneHotEncoder(handle_unknown="ignore"), ["occupation"]),
    ])),
    ("qr", QuantileRegressor(quantile=0.5, alpha=0.0, solver="highs")),
])

X, y = train[numeric + ["occupation"]], train["hours"]
X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=3)
model.fit(X_tr, y_tr)
print("holdout MAE:", round(mean_absolute_error(y_va, model.predict(X_va)), 1),
      "| median baseline:", round(mean_absolute_error(y_va, np.full(len(y_va), y_tr.median())), 1))

model.fit(X, y)
pred = np.clip(model.predict(test[numeric + ["occupation"]]), 0, None)
pd.DataFrame({"id": test["id"], "hours": pred}).to_csv("submission.csv", index=False)
