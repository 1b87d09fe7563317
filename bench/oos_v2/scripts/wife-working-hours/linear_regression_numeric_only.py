# idiom: LinearRegression on select_dtypes('number') columns (the husband's occupation silently left out), R^2 printed on the training rows; intended: valid
import pandas as pd
from sklearn.linear_model import LinearRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

X = train.select_dtypes("number").drop(columns=["id", "hours"])
y = train["hours"]
reg = LinearRegression().fit(X, y)
print("train R^2:", round(reg.score(X, y), 3))
print(pd.Series(reg.coef_, index=X.columns).round(2))

pd.DataFrame({"id": test["id"], "hours": reg.predict(test[X.columns])}).to_csv("submission.csv", index=False)
