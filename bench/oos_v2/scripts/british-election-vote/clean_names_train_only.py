# idiom: a clean_column_names helper (dots to underscores, lower case) applied when reading the training file only, the feature list then taken from the cleaned names and used on the raw test frame; intended: crash (KeyError: the test frame keeps the dotted, capitalised names)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier


def clean_column_names(df):
    df = df.copy()
    df.columns = [c.replace(".", "_").lower() for c in df.columns]
    return df


train = clean_column_names(pd.read_csv("data/train.csv"))
test = pd.read_csv("data/test.csv")

train["gender"] = train["gender"].map({"female": 0, "male": 1})
test["gender"] = test["gender"].map({"female": 0, "male": 1})

features = [c for c in train.columns if c not in ("id", "vote")]
print("features:", features)
rf = RandomForestClassifier(n_estimators=300, min_samples_leaf=3, random_state=8)
rf.fit(train[features], train["vote"])

proba = rf.predict_proba(test[features])
sub = pd.DataFrame(proba, columns=rf.classes_)
sub.insert(0, "id", test["id"])
sub.to_csv("submission.csv", index=False)
