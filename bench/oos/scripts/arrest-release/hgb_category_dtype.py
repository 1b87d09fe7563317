# idiom: pandas 'category' dtype with HistGradientBoosting's native categorical support, sample weights for class balance; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.utils.class_weight import compute_sample_weight

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

cats = ["colour", "sex", "employed", "citizen"]
for col in cats:
    levels = sorted(train[col].dropna().unique())
    train[col] = pd.Categorical(train[col], categories=levels)
    test[col] = pd.Categorical(test[col], categories=levels)

feats = cats + ["year", "age", "checks"]
y = train["released"]
weights = compute_sample_weight("balanced", y)

clf = HistGradientBoostingClassifier(categorical_features="from_dtype", max_iter=200, learning_rate=0.05,
                                     max_depth=4, random_state=0)
clf.fit(train[feats], y, sample_weight=weights)
pred = clf.predict(test[feats])
print("predicted share released:", np.mean(pred == "Yes"))
pd.DataFrame({"id": test.id, "released": pred}).to_csv("submission.csv", index=False)
