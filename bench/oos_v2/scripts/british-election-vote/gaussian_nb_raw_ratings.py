# idiom: GaussianNB on the raw rating columns with gender as 0/1, predict_proba framed with nb.classes_ as the header and the id inserted first; intended: valid
import pandas as pd
from sklearn.naive_bayes import GaussianNB

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
for df in (train, test):
    df["gender"] = (df["gender"] == "female").astype(int)

X = train.drop(columns=["id", "vote"])
nb = GaussianNB().fit(X, train["vote"])
proba = nb.predict_proba(test.drop(columns=["id"]))

out = pd.DataFrame(proba, columns=nb.classes_)
out.insert(0, "id", test["id"].values)
out.to_csv("submission.csv", index=False)
print(out.iloc[:, 1:].mean())
