# idiom: the id column dropped right after reading "because it is not a feature", the submission's ids rebuilt from the test frame's RangeIndex; intended: invalid submission (ids 0..n-1 are not the test ids)
import pandas as pd
from sklearn.ensemble import RandomForestRegressor

train = pd.read_csv("data/train.csv").drop(columns=["id"])
test = pd.read_csv("data/test.csv").drop(columns=["id"])

train = pd.get_dummies(train, columns=["occupation"], dtype=int)
test = pd.get_dummies(test, columns=["occupation"], dtype=int)
features = [c for c in train.columns if c != "hours"]
test = test.reindex(columns=features, fill_value=0)

rf = RandomForestRegressor(n_estimators=200, min_samples_leaf=10, random_state=1)
rf.fit(train[features], train["hours"])

submission = pd.DataFrame({"id": test.index, "hours": rf.predict(test[features])})
submission.to_csv("submission.csv", index=False)
print(submission.head())
