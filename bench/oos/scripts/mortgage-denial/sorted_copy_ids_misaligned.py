# idiom: test rows sorted by a risk ratio "for inspection", predictions made on the sorted copy but written next to the unsorted ids; intended: wrong (predictions land on the wrong rows)
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

binary_cols = [c for c in train.columns if train[c].isin(["yes", "no"]).all() and c != "deny"]
for df in (train, test):
    df[binary_cols] = (df[binary_cols] == "yes").astype(int)

features = [c for c in train.columns if c not in ("id", "deny")]
model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_depth=3, random_state=0)
model.fit(train[features], (train["deny"] == "yes").astype(int))

# look at the riskiest applications first
test_sorted = test.sort_values("pirat", ascending=False).reset_index(drop=True)
test_sorted["p_deny"] = model.predict_proba(test_sorted[features])[:, 1]
print(test_sorted[["pirat", "lvrat", "p_deny"]].head(10))

submission = pd.DataFrame({"id": test["id"], "deny": test_sorted["p_deny"]})
submission.to_csv("submission.csv", index=False)
