# idiom: a LabelEncoder fitted separately on the train and on the test names and zip codes (fit_transform in a helper called once per frame), RandomForest on the codes plus licence year and month; intended: wrong (the test codes mean other names and zips than the train codes)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.preprocessing import LabelEncoder


def encode(df):
    out = pd.DataFrame(index=df.index)
    out["name_code"] = LabelEncoder().fit_transform(df["animal_name"].fillna("unknown").str.lower())
    out["zip_code"] = LabelEncoder().fit_transform(df["zip_code"].fillna("unknown").astype("str"))
    issued = pd.to_datetime(df["license_issue_date"])
    out["year"] = issued.dt.year
    out["month"] = issued.dt.month
    return out


train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
X_train, X_test = encode(train), encode(test)
y = train["species"]

rf = RandomForestClassifier(n_estimators=300, min_samples_leaf=3, random_state=0)
rf.fit(X_train, y)
print("train accuracy:", round(rf.score(X_train, y), 3))
proba = rf.predict_proba(X_test)[:, list(rf.classes_).index("Dog")]
pd.DataFrame({"id": test["id"], "species": proba}).to_csv("submission.csv", index=False)
