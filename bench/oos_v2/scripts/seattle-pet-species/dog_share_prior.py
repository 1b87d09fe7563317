# idiom: prior-probability baseline: the share of dogs in train, written into the sample submission's target column; intended: valid
import pandas as pd

train = pd.read_csv("data/train.csv")
sub = pd.read_csv("data/sample_submission.csv")

p_dog = (train["species"] == "Dog").mean()
sub["species"] = p_dog
sub.to_csv("submission.csv", index=False)
print(f"P(Dog) = {p_dog:.4f} for all {len(sub)} rows")
