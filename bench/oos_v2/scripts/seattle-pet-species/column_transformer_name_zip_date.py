# idiom: one ColumnTransformer for a text column (TfidfVectorizer char_wb on the name), a rare-aware OneHotEncoder(min_frequency, handle_unknown='infrequent_if_exist') on the zip code and scaled date parts, LogisticRegression; intended: valid
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def prepare(df):
    out = pd.DataFrame({"name": df["animal_name"].fillna("").str.lower()})
    out["zip5"] = df["zip_code"].astype("str").str[:5].fillna("none")
    issued = pd.to_datetime(df["license_issue_date"])
    out["days"] = (issued - pd.Timestamp("2015-01-01")).dt.days
    out["month"] = issued.dt.month
    return out


X, X_test = prepare(train), prepare(test)
y = (train["species"] == "Dog").astype(int)

pre = ColumnTransformer([
    ("name", TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 4), min_df=2, sublinear_tf=True), "name"),
    ("zip", OneHotEncoder(min_frequency=10, handle_unknown="infrequent_if_exist"), ["zip5"]),
    ("date", StandardScaler(), ["days", "month"]),
])
model = Pipeline([("pre", pre), ("lr", LogisticRegression(C=1.5, max_iter=3000))])

oof = cross_val_predict(model, X, y, cv=5, method="predict_proba")[:, 1]
print("CV log loss:", round(log_loss(y, oof), 4))
model.fit(X, y)
pd.DataFrame({"id": test["id"], "species": model.predict_proba(X_test)[:, 1]}).to_csv("submission.csv", index=False)
