# idiom: make_pipeline of a one-hot make_column_transformer and GradientBoostingClassifier, the predict_proba column of 'yes' written as the submission as for an AUC task; intended: invalid submission (balanced accuracy needs the labels no/yes, not probabilities)
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

X = train.drop(columns=["id", "ui"])
cats = X.select_dtypes(exclude="number").columns.tolist()
model = make_pipeline(
    make_column_transformer((OneHotEncoder(handle_unknown="ignore"), cats), remainder="passthrough"),
    GradientBoostingClassifier(n_estimators=200, max_depth=3, learning_rate=0.05, random_state=1),
)
model.fit(X, train["ui"])
proba = model.predict_proba(test.drop(columns=["id"]))[:, 1]

submission = pd.DataFrame({"id": test["id"], "ui": proba.round(4)})
submission.to_csv("submission.csv", index=False)
print(submission.head())
