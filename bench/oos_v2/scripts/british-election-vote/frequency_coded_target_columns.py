# idiom: target coded by a hand-written dict in order of frequency (Labour=0, Conservative=1, Liberal Democrat=2), ExtraTrees probabilities written under the sample submission's header; intended: wrong (the header is alphabetical, so the Conservative and Labour columns are swapped)
import pandas as pd
from sklearn.ensemble import ExtraTreesClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
sample = pd.read_csv("data/sample_submission.csv")

party_code = {"Labour": 0, "Conservative": 1, "Liberal Democrat": 2}
y = train["vote"].map(party_code)

for df in (train, test):
    df["gender"] = df["gender"].eq("male").astype(int)
features = [c for c in test.columns if c != "id"]

model = ExtraTreesClassifier(n_estimators=300, min_samples_leaf=5, random_state=0)
model.fit(train[features], y)
proba = model.predict_proba(test[features])

submission = pd.DataFrame(proba, columns=sample.columns[1:])
submission.insert(0, "id", test["id"])
submission.to_csv("submission.csv", index=False)
print(submission.iloc[:, 1:].mean())
