# idiom: make_column_transformer with a default OneHotEncoder() on the raw zip code beside a word CountVectorizer on the name, LogisticRegression pipeline; intended: crash (ValueError: a test zip code never seen in train, and handle_unknown defaults to 'error')
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
for df in (train, test):
    df["animal_name"] = df["animal_name"].fillna("unknown")
    df["zip_code"] = df["zip_code"].fillna("missing")

features = ["animal_name", "zip_code"]
model = make_pipeline(
    make_column_transformer(
        (CountVectorizer(lowercase=True), "animal_name"),
        (OneHotEncoder(), ["zip_code"]),
    ),
    LogisticRegression(C=0.5, max_iter=1000),
)
model.fit(train[features], train["species"])

p_dog = model.predict_proba(test[features])[:, 1]
pd.DataFrame({"id": test["id"], "species": p_dog}).to_csv("submission.csv", index=False)
