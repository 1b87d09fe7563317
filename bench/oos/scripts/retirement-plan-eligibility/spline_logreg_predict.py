# idiom: SplineTransformer on income and age with a passthrough for the rest, LogisticRegression(class_weight='balanced'), .predict() labels; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import classification_report
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import SplineTransformer, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

smooth = ["inc", "age"]
linear = ["marr", "male", "fsize", "nettfa", "pira"]
pipeline = Pipeline([
    ("features", ColumnTransformer([
        ("splines", SplineTransformer(n_knots=6, degree=3), smooth),
        ("scaled", StandardScaler(), linear),
    ])),
    ("logit", LogisticRegression(class_weight="balanced", C=1.0, max_iter=3000)),
])

X_tr, X_te, y_tr, y_te = train_test_split(train[smooth + linear], train["e401k"], test_size=0.2, random_state=21)
pipeline.fit(X_tr, y_tr)
print(classification_report(y_te, pipeline.predict(X_te), digits=3))

pipeline.fit(train[smooth + linear], train["e401k"])
pd.DataFrame({"id": test["id"], "e401k": pipeline.predict(test[smooth + linear])}).to_csv("submission.csv", index=False)
