# idiom: train['age'].fillna(..., inplace=True) chained assignment (a silent no-op under pandas 3 copy-on-write), LogisticRegression; intended: crash (ValueError: Input X contains NaN)
import pandas as pd
from sklearn.linear_model import LogisticRegression

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# fill missing ages with the median
train["age"].fillna(train["age"].median(), inplace=True)
test["age"].fillna(train["age"].median(), inplace=True)

for df in (train, test):
    df["is_female"] = (df["sex"] == "female").astype(int)
    df["first_class"] = (df["passengerClass"] == "1st").astype(int)
    df["third_class"] = (df["passengerClass"] == "3rd").astype(int)

cols = ["is_female", "first_class", "third_class", "age"]
logreg = LogisticRegression(max_iter=500)
logreg.fit(train[cols], train["survived"])
print("Train accuracy:", logreg.score(train[cols], train["survived"]))

test["survived"] = logreg.predict(test[cols])
test[["id", "survived"]].to_csv("submission.csv", index=False)
