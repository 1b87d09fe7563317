# idiom: StandardScaler + RBF SVC pipeline predicting the party, written as an id,vote file as in a label competition without reading sample_submission.csv; intended: invalid submission (the metric needs one probability column per party)
import pandas as pd
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
for df in (train, test):
    df["gender"] = (df["gender"] == "male").astype(int)

X = train.drop(columns=["id", "vote"])
y = train["vote"]
svc = make_pipeline(StandardScaler(), SVC(C=1.0, gamma="scale"))
print("CV accuracy:", cross_val_score(svc, X, y, cv=5).mean().round(4))

svc.fit(X, y)
pd.DataFrame({"id": test["id"], "vote": svc.predict(test.drop(columns=["id"]))}).to_csv("submission.csv", index=False)
