# idiom: RandomForestRegressor on LabelEncoder-coded string columns with the school id left as a plain integer, feature_importances_ printed as a sorted Series; intended: valid
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.preprocessing import LabelEncoder

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for col in ["minrty", "sx", "sector"]:
    encoder = LabelEncoder().fit(train[col])
    train[col] = encoder.transform(train[col])
    test[col] = encoder.transform(test[col])

X = train.drop(columns=["id", "mAch"])
rf = RandomForestRegressor(n_estimators=200, min_samples_leaf=5, random_state=0)
rf.fit(X, train["mAch"])
print(pd.Series(rf.feature_importances_, index=X.columns).sort_values(ascending=False))

pd.DataFrame({"id": test["id"], "mAch": rf.predict(test[X.columns])}).to_csv("submission.csv", index=False)
