# idiom: two-part (hurdle) model: a classifier for P(earnings > 0) times a regressor fitted on the positive earnings only; intended: valid
import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")
cols = ["trt", "age", "educ", "black", "hisp", "marr", "nodeg", "re74", "re75"]

employed = (train["re78"] > 0).astype(int)
clf = RandomForestClassifier(n_estimators=300, min_samples_leaf=10, random_state=8)
clf.fit(train[cols], employed)

positive = train[train["re78"] > 0]
reg = GradientBoostingRegressor(loss="absolute_error", n_estimators=300, max_depth=3, learning_rate=0.05,
                                random_state=8)
reg.fit(positive[cols], positive["re78"])

p_work = clf.predict_proba(test[cols])[:, 1]
earnings_if_work = reg.predict(test[cols])
# for an absolute error, predict the median: zero when work is unlikely
prediction = np.where(p_work >= 0.5, earnings_if_work, 0.0)
print("share predicted zero:", (prediction == 0).mean())
pd.DataFrame({"id": test["id"], "re78": prediction}).to_csv("submission.csv", index=False)
