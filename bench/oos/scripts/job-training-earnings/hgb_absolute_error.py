# idiom: HistGradientBoostingRegressor with loss='absolute_error' because the metric is MAE, early stopping, engineered flags; intended: valid
import pandas as pd
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for df in [train, test]:
    df["u74"] = (df["re74"] == 0).astype(int)
    df["u75"] = (df["re75"] == 0).astype(int)
    df["re_growth"] = df["re75"] - df["re74"]

FEATURES = ["trt", "age", "educ", "black", "hisp", "marr", "nodeg", "re74", "re75", "u74", "u75", "re_growth"]

X_tr, X_va, y_tr, y_va = train_test_split(train[FEATURES], train["re78"], test_size=0.2, random_state=5)
model = HistGradientBoostingRegressor(loss="absolute_error", learning_rate=0.05, max_iter=500,
                                      early_stopping=True, validation_fraction=0.15, random_state=5)
model.fit(X_tr, y_tr)
print("holdout MAE:", mean_absolute_error(y_va, model.predict(X_va)), "iterations:", model.n_iter_)

model.fit(train[FEATURES], train["re78"])
pred = model.predict(test[FEATURES]).clip(min=0)
pd.DataFrame({"id": test["id"], "re78": pred}).to_csv("submission.csv", index=False)
