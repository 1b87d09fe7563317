# idiom: hand-crafted name features through the .str accessor (length, vowel share, ends in y/ie or a, two words, has a digit, missing) plus licence year, LogisticRegression probabilities; intended: valid
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def name_features(df):
    name = df["animal_name"].fillna("").str.strip()
    lower = name.str.lower()
    length = name.str.len()
    return pd.DataFrame({
        "length": length,
        "vowel_share": lower.str.count(r"[aeiou]") / length.clip(lower=1),
        "ends_y": lower.str.endswith(("y", "ie")).astype(int),
        "ends_a": lower.str.endswith("a").astype(int),
        "two_words": name.str.contains(" ").astype(int),
        "has_digit": name.str.contains(r"\d").astype(int),
        "missing": (length == 0).astype(int),
        "year": pd.to_datetime(df["license_issue_date"]).dt.year,
    })


scaler = StandardScaler()
X = scaler.fit_transform(name_features(train))
X_test = scaler.transform(name_features(test))
y = (train["species"] == "Dog").astype(int)

clf = LogisticRegression(max_iter=1000).fit(X, y)
print(dict(zip(name_features(train).columns, clf.coef_[0].round(3))))
pd.DataFrame({"id": test["id"], "species": clf.predict_proba(X_test)[:, 1]}).to_csv("submission.csv", index=False)
