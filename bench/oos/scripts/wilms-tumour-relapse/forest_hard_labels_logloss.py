# idiom: RandomForestClassifier with accuracy printed, then .predict() written out; intended: wrong (hard 0/1 labels where log loss needs probabilities)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split

df = pd.read_csv('data/train.csv')
test_df = pd.read_csv('data/test.csv')

X = df.drop(columns=['id', 'rel'])
y = df['rel']
X_test = test_df.drop(columns=['id'])

X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.25, random_state=0)
rf = RandomForestClassifier(n_estimators=250, max_depth=8, random_state=0)
rf.fit(X_train, y_train)
print('Validation accuracy:', accuracy_score(y_valid, rf.predict(X_valid)))

rf.fit(X, y)
test_df['rel'] = rf.predict(X_test)
test_df[['id', 'rel']].to_csv('submission.csv', index=False)
print(test_df['rel'].value_counts())
