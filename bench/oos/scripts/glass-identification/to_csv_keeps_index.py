# idiom: ExtraTrees on log-ratio features, submission frame indexed by id and written with to_csv() defaults plus an id column; intended: invalid submission (an extra unnamed index column)
import numpy as np
import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

oxides = ["Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe"]
for df in (train, test):
    df["Na_Si"] = np.log1p(df["Na"]) - np.log1p(df["Si"])
    df["Ca_Mg"] = np.log1p(df["Ca"]) - np.log1p(df["Mg"])
    df["n_zero"] = (df[oxides] == 0).sum(axis=1)

features = ["RI"] + oxides + ["Na_Si", "Ca_Mg", "n_zero"]
et = ExtraTreesClassifier(n_estimators=500, random_state=0)
et.fit(train[features], train["type"])

submission = pd.DataFrame({"type": et.predict(test[features])}, index=test["id"])
submission["id"] = submission.index
submission.to_csv("submission.csv")
print(submission.head())
