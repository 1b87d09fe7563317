# idiom: Pipeline(ColumnTransformer(OrdinalEncoder), RandomForest), cross_val_score accuracy, fit on all rows; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

cat_features = ["Gender", "item", "btype", "situ", "mode"]
num_features = ["Anger"]

preprocess = ColumnTransformer(
    transformers=[
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), cat_features),
        ("num", "passthrough", num_features),
    ]
)
pipe = Pipeline(steps=[
    ("prep", preprocess),
    ("model", RandomForestClassifier(n_estimators=400, min_samples_leaf=5, max_features=0.6, random_state=2024)),
])

X = train[cat_features + num_features]
y = train["r2"]
cv = KFold(n_splits=5, shuffle=True, random_state=2024)
scores = cross_val_score(pipe, X, y, cv=cv, scoring="accuracy")
print("CV accuracy: %.4f (+/- %.4f)" % (scores.mean(), scores.std()))

pipe.fit(X, y)
submission = pd.DataFrame({"id": test["id"], "r2": pipe.predict(test[cat_features + num_features])})
submission.to_csv("submission.csv", index=False)
print(submission.head())
