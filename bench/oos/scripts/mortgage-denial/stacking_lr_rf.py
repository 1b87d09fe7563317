# idiom: StackingClassifier of a scaled LogisticRegression and a RandomForest with a LogisticRegression meta-model, yes/no flags mapped with replace(); intended: valid
import pandas as pd
from sklearn.ensemble import RandomForestClassifier, StackingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

flags = ["phist", "selfemp", "insurance", "condomin", "afam", "single", "hschool"]
for frame in (train, test):
    for col in flags:
        frame[col] = frame[col].map({"yes": 1, "no": 0})

X = train.drop(columns=["id", "deny"])
y = train["deny"].map({"no": 0, "yes": 1})

stack = StackingClassifier(
    estimators=[
        ("lr", make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))),
        ("rf", RandomForestClassifier(n_estimators=300, min_samples_leaf=5, random_state=0)),
    ],
    final_estimator=LogisticRegression(),
    cv=5,
    stack_method="predict_proba",
)
oof = cross_val_predict(stack, X, y, cv=3, method="predict_proba")[:, 1]
print("CV log loss:", round(log_loss(y, oof), 4))

stack.fit(X, y)
pd.DataFrame({"id": test["id"], "deny": stack.predict_proba(test[X.columns])[:, 1]}).to_csv("submission.csv", index=False)
