# idiom: constant baseline with the training median (the best constant for an absolute error), written with a dict-built DataFrame; intended: valid
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

median_hours = float(train["hours"].median())
print("median hours:", median_hours, "mean hours:", round(train["hours"].mean(), 1))
pd.DataFrame({"id": test["id"], "hours": [median_hours] * len(test)}).to_csv("submission.csv", index=False)
