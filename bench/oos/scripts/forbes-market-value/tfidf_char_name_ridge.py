# idiom: ColumnTransformer mixing TfidfVectorizer(char_wb) on the company name, one-hot country/category and log-scaled financials, Ridge on log1p target; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler


def signed_log(x):
    return np.sign(x) * np.log1p(np.abs(x))


train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

features = ColumnTransformer([
    ("name", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=3, sublinear_tf=True), "name"),
    ("cat", OneHotEncoder(handle_unknown="ignore", min_frequency=5), ["country", "category"]),
    ("num", make_pipeline(SimpleImputer(strategy="median"), FunctionTransformer(signed_log), StandardScaler()),
     ["sales", "profits", "assets"]),
])
model = Pipeline([("features", features), ("ridge", Ridge(alpha=2.0))])

X = train[["name", "country", "category", "sales", "profits", "assets"]]
y_log = np.log1p(train["marketvalue"])
rmsle = np.sqrt(-cross_val_score(model, X, y_log, cv=5, scoring="neg_mean_squared_error"))
print("CV RMSLE:", rmsle.mean().round(4))

model.fit(X, y_log)
pred = np.expm1(model.predict(test[X.columns])).clip(min=0)
pd.DataFrame({"id": test["id"], "marketvalue": pred}).to_csv("submission.csv", index=False)
