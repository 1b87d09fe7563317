# idiom: hand-made crossed feature in pandas (situation x behaviour x mode), OneHotEncoder + LogisticRegression pipeline, accuracy by 5-fold CV; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for df in (train, test):
    df["combo"] = df["situ"] + "_" + df["btype"] + "_" + df["mode"]
    df["gender_btype"] = df["Gender"] + "_" + df["btype"]

cats = ["item", "combo", "gender_btype", "Gender"]
clf = Pipeline([
    ("ct", ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), cats),
                              ("anger", StandardScaler(), ["Anger"])])),
    ("lr", LogisticRegression(C=0.3, max_iter=2000)),
])
print("CV accuracy:", cross_val_score(clf, train[cats + ["Anger"]], train["r2"], cv=5).mean().round(4))
clf.fit(train[cats + ["Anger"]], train["r2"])
pd.DataFrame({"id": test["id"], "r2": clf.predict(test[cats + ["Anger"]])}).to_csv("submission.csv", index=False)
