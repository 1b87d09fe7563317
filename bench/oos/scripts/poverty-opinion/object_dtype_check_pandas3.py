# idiom: categorical columns found with df[col].dtype == 'object' (pandas 3 reads strings as the 'str' dtype, so none is found); intended: crash (ValueError: could not convert string to float)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.preprocessing import OrdinalEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

target = "poverty"
features = [c for c in train.columns if c not in ["id", target]]

categorical = [c for c in features if train[c].dtype == "object"]
numerical = [c for c in features if c not in categorical]
print(f"categorical: {categorical}\nnumerical: {numerical}")

if categorical:
    enc = OrdinalEncoder()
    train[categorical] = enc.fit_transform(train[categorical])
    test[categorical] = enc.transform(test[categorical])

clf = RandomForestClassifier(n_estimators=300, max_depth=10, random_state=0)
clf.fit(train[features], train[target])
test[target] = clf.predict(test[features])
test[["id", target]].to_csv("submission.csv", index=False)
