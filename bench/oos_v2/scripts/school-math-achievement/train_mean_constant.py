# idiom: constant baseline, np.full with the training mean, written through the frame of sample_submission.csv; intended: valid
import numpy as np
import pandas as pd

train = pd.read_csv("data/train.csv")
sample = pd.read_csv("data/sample_submission.csv")

mean_score = train["mAch"].mean()
sample["mAch"] = np.full(len(sample), mean_score)
sample.to_csv("submission.csv", index=False)
print("predicted", round(mean_score, 3), "for", len(sample), "students")
