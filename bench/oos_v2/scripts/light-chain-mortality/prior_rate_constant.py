# idiom: quick first submission: the training death rate from value_counts(normalize=True) written for every test row; intended: valid
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

rate = train["death"].value_counts(normalize=True).get(1, 0.0)
print(f"death rate in train: {rate:.3f} ({len(train)} rows)")

submission = pd.DataFrame({"id": test["id"], "death": rate})
submission.to_csv("submission.csv", index=False)
print(submission.head())
