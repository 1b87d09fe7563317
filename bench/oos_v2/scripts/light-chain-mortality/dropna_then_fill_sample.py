# idiom: rows with a missing value dropped from train and test "to keep the model clean", predictions put into sample_submission.csv through an index-aligned Series; intended: invalid submission (the dropped test rows are left empty)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("data/train.csv").dropna()
test = pd.read_csv("data/test.csv")
sub = pd.read_csv("data/sample_submission.csv")

test_clean = test.dropna()
print(f"dropped {len(test) - len(test_clean)} test rows with missing values")

features = ["age", "sample.yr", "kappa", "lambda", "flc.grp", "creatinine", "mgus"]
rf = RandomForestClassifier(n_estimators=250, min_samples_leaf=10, random_state=42)
rf.fit(train[features], train["death"])

sub["death"] = pd.Series(rf.predict_proba(test_clean[features])[:, 1], index=test_clean.index)
sub.to_csv("submission.csv", index=False)
print(sub.describe())
